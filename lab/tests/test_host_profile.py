"""lab.bench.host_profile's CPU side: the cProfile rows name the function that owns the time, per call."""
from lab.bench.host_profile import profile_rows, render


def _slow_leaf():
    acc = 0
    for i in range(20000):   # pure bytecode: all of it is this function's own time
        acc += i * i
    return acc


def _caller():
    _slow_leaf()
    _slow_leaf()


def test_profile_rows_rank_the_owner_first_per_call():
    rows = profile_rows(_caller, calls=20)
    top = rows[0]
    assert "_slow_leaf" in top["function"], rows[:3]
    assert top["calls_per_call"] == 2.0 and top["own_us"] > 0
    caller = next(r for r in rows if "_caller" in r["function"])
    assert caller["cum_us"] >= top["own_us"] and caller["own_us"] < top["own_us"]


def test_render_lists_every_shape_and_host_time():
    doc = {"shapes": [{"id": "s1", "chunk": 64, "host_ms": {"forward": 0.2, "scan": 0.05},
                       "profile": profile_rows(_caller, calls=2)}]}
    text = render(doc)
    assert "## s1 chunk 64" in text and "forward 0.2000" in text and "_slow_leaf" in text
