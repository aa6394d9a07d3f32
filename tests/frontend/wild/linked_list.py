import triton
import triton.language as tl


@triton.jit
def linked_list_sum_kernel(head_ptr, next_ptr, value_ptr, out_ptr, count_ptr):
    # every program walks one chain: node = head[pid]; node = next[node] ... until -1
    pid = tl.program_id(0)
    node = tl.load(head_ptr + pid)
    total = 0.0
    count = 0
    while node != -1:
        total += tl.load(value_ptr + node)
        count += 1
        node = tl.load(next_ptr + node)
    tl.store(out_ptr + pid, total)
    tl.store(count_ptr + pid, count)
