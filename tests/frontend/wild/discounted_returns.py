import triton
import triton.language as tl


@triton.jit
def discounted_returns_kernel(rewards_ptr, dones_ptr, returns_ptr, T, n_envs, gamma, BLOCK_E: tl.constexpr):
    # G_t = r_t + gamma * G_{t+1} * (1 - done_t), walked backwards in time
    env = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)
    mask = env < n_envs
    running = tl.zeros([BLOCK_E], dtype=tl.float32)
    for t in range(T - 1, -1, -1):
        r = tl.load(rewards_ptr + t * n_envs + env, mask=mask, other=0.0)
        d = tl.load(dones_ptr + t * n_envs + env, mask=mask, other=0).to(tl.float32)
        running = r + gamma * running * (1.0 - d)
        tl.store(returns_ptr + t * n_envs + env, running, mask=mask)
