"""KernelInfo.explore_one_in: how often an implementation's GPU draws leave the triage battery's compile classes."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.registry import KernelInfo, lookup
from properties import triage
from properties.strategies import ssd_problems


def _explored(info, n: int = 120) -> int:
    """Draws, of n derandomized GPU draws, outside the compile classes of the triage battery."""
    battery = {info.compile_class(p) for p in triage.battery(info, True, None, None)}
    got = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None)
    @given(data=st.data())
    def draw(data):
        got.append(info.compile_class(data.draw(ssd_problems(info, gpu=True))))

    draw()
    return sum(k not in battery for k in got)


def test_tilegym_as_shipped_draws_only_the_classes_its_prime_builds():
    """Shipped TileGym searches every new class by compiling each candidate in turn (minutes before the
    first answer), so its draws stay in the battery's classes; the first-config mode still explores."""
    shipped, first = lookup("tilegym"), lookup("tilegym-first-config")
    assert shipped.explore_one_in == 0 and first.explore_one_in is None
    assert _explored(shipped) == 0
    assert _explored(first) >= 5
    assert _explored(shipped.replace(explore_one_in=None)) >= 5   # the field is what keeps them in


@pytest.mark.parametrize("value", [-1, 1.5, "8"])
def test_a_bad_explore_rate_names_the_field(value):
    with pytest.raises(ValueError, match=r"KernelInfo\('t'\)\.explore_one_in: expected None or an int >= 0"):
        KernelInfo(name="t", fn=lambda **kw: None, explore_one_in=value)
