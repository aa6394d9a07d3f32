import triton
import triton.language as tl


@triton.jit
def paged_gather_kv(cache_ptr, block_table_ptr, seq_lens_ptr, out_ptr, max_blocks, max_len,
                    PAGE: tl.constexpr, HEAD: tl.constexpr):
    # out[s, i, :] = cache[block_table[s, i // PAGE], i % PAGE, :] for i < seq_len[s], else zeros
    s = tl.program_id(0)
    page_no = tl.program_id(1)
    seq_len = tl.load(seq_lens_ptr + s)
    pos = page_no * PAGE + tl.arange(0, PAGE)
    d = tl.arange(0, HEAD)
    live = pos < seq_len
    block = tl.load(block_table_ptr + s * max_blocks + page_no, mask=page_no * PAGE < seq_len, other=0)
    src = cache_ptr + block.to(tl.int64) * (PAGE * HEAD) + (pos % PAGE)[:, None] * HEAD + d[None, :]
    vals = tl.load(src, mask=live[:, None], other=0.0)
    dst = out_ptr + (s * max_len + pos)[:, None] * HEAD + d[None, :]
    tl.store(dst, vals, mask=pos[:, None] < max_len)
