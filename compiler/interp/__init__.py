"""The reference interpreter: runs tile IR on NumPy arrays, the executable statement of what each op means.

`run_kernel(module, kernel_name, args, grid)` runs one program per grid point (axis 0 fastest), one
after another, each op vectorised over its whole tile. Choices where Triton leaves room:

- Values: NumPy arrays of the IR type's dtype (0-d for scalars); bf16 is float32 rounded to bf16
  (nearest even) after every op; pointers are int64 byte addresses into fake 4096-aligned buffers.
- Arithmetic is done in the IR dtype (f16 in float16, f32 in float32, never silently in float64);
  integers wrap; C division and remainder (x/0 and x%0 give 0, MIN/-1 gives MIN); shifts by
  >= bits give 0 (shl, logical shr) or the sign (arithmetic shr).
- Transcendentals (exp, log, sin, pow, erf, ...) are evaluated in float64 and rounded once to the
  IR type: the most accurate reference, so backends are compared with a tolerance. fma rounds once.
- dot: products of f16/bf16/f32/fp8 inputs are exact and accumulated in float32 (`input_precision =
  "tf32"` is computed as ieee f32; the two fp8 formats may be mixed), then rounded to the accumulator
  type; integer dots wrap in it.
- reduce combines as a balanced tree in the IR dtype (first half with second half, rounding each
  step: f16 reduces in f16, i8 sums wrap in i8, as the IR says; a frontend that wants wider sums
  casts first). scan is sequential along its axis, each step rounded. max/min (and atomics max/min)
  let a number win over NaN unless `propagate_nan`; argmax/argmin ignore NaN, ties go to the lowest index.
  reduce_with/scan_with run their combiner region in the same orders (combine.py), once per step over
  all the lanes of the step.
- for iterates while iv < ub (step > 0) or iv > ub (step < 0); step 0 is an InterpError.
- Memory: masked-off lanes never touch memory; a load's masked-off lanes take `other` (or 0); a
  store whose lanes repeat an address keeps the last lane; atomics apply lanes in lane order and
  return the old values (0 in masked-off lanes); atomic_cas compares bit patterns.
- Errors are CompileErrors located at the op: MemoryFault (an active lane outside every argument
  buffer, or misaligned), InterpAssertionError (`assert`), InterpError (step 0, endless loops: more
  than `max_ops` ops). Wrong arguments (count, dtype, non-contiguous arrays) raise TypeError.
"""

from .errors import InterpAssertionError, InterpError, MemoryFault
from .machine import run_kernel

__all__ = ["InterpError", "InterpAssertionError", "MemoryFault", "run_kernel"]
