"""lab/scripts/sass_diff.py: opcodes are read from a cuobjdump listing, predicates and operands aside."""
from __future__ import annotations

from collections import Counter

from lab.scripts import sass_diff

LISTING = """
        code for sm_90a
                Function : chunk_cumsum_kernel
        /*0000*/                   LDC R1, c[0x0][0x28] ;                                /* 0x00000a00ff017b82 */
        /*0100*/              @!P0 BRA 0x1f0 ;                                           /* 0x0000000000388947 */
        /*13b0*/                   FFMA.SAT R0, R9, R10, 0.5 ;                           /* 0x3f00000009007423 */
        /*13f0*/                   FFMA R2, R9, 1.4426950216293334961, -R2 ;             /* 0x3fb8aa3b09027823 */
        /*1400*/               @P1 SHFL.UP PT, R3, R2, 0x1, RZ ;                         /* 0x0420000002037989 */
        /*1410*/              @!UPT UIADD3 UR4, UR4, 0x1, URZ ;                          /* 0x0000000104047890 */
        /*1420*/                   SHFL.UP PT, R5, R3, 0x2, RZ ;                         /* 0x0440000003057989 */
"""


def test_each_instruction_is_counted_by_opcode_with_its_modifiers():
    assert sass_diff.opcodes(LISTING) == Counter({"LDC": 1, "BRA": 1, "FFMA.SAT": 1, "FFMA": 1, "SHFL.UP": 2,
                                                  "UIADD3": 1})


def test_the_table_lists_only_what_changed_most_changed_first_and_the_totals():
    a = Counter({"SHFL.UP": 120, "FFMA": 465, "MUFU.EX2": 24, "EXIT": 2})
    b = Counter({"SHFL.UP": 16, "FFMA": 313, "MUFU.EX2": 24, "LDS": 64, "EXIT": 2})
    lines = sass_diff.diff_table(a, b)
    assert lines[2:5] == ["| FFMA | 465 | 313 | -152 |", "| SHFL.UP | 120 | 16 | -104 |", "| LDS | 0 | 64 | +64 |"]
    assert not any("MUFU.EX2" in x or "EXIT" in x for x in lines)
    assert lines[-1] == "| all instructions | 611 | 419 | -192 |"
