"""The conformance table: every case of the suite, importable by any runner (interpreter, cpu, cuda)."""

from __future__ import annotations

from .case import Case
from .cases_combine import CASES as COMBINE
from .cases_control import CASES as CONTROL
from .cases_dtypes import CASES as DTYPES
from .cases_elementwise import CASES as ELEMENTWISE
from .cases_fuzz_found import CASES as FUZZ_FOUND
from .cases_memory import CASES as MEMORY
from .cases_reduce import CASES as REDUCE
from .cases_returns import CASES as RETURNS

CASES: list[Case] = [*ELEMENTWISE, *MEMORY, *REDUCE, *COMBINE, *CONTROL, *RETURNS, *FUZZ_FOUND, *DTYPES]
BY_NAME: dict[str, Case] = {c.name: c for c in CASES}
assert len(BY_NAME) == len(CASES), "case names are unique"
