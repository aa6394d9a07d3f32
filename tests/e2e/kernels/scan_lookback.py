import triton
import triton.language as tl


@triton.jit
def chained_scan(x_ptr, out_ptr, ticket_ptr, totals_ptr, flags_ptr, n, BLOCK: tl.constexpr):
    # blocks are numbered by arrival (a ticket), and block t waits for block t-1's running total:
    # every block waits only on one that has already started, so no launch order can deadlock
    t = tl.atomic_add(ticket_ptr, 1)
    offs = t * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    local = tl.cumsum(x, axis=0)
    carry = 0
    if t > 0:
        while tl.load(flags_ptr + t - 1, volatile=True) == 0:
            pass
        carry = tl.load(totals_ptr + t - 1, volatile=True)
    tl.store(out_ptr + offs, local + carry, mask=offs < n)
    tl.store(totals_ptr + t, carry + tl.sum(x, axis=0))
    tl.debug_barrier()
    tl.atomic_xchg(flags_ptr + t, 1)
