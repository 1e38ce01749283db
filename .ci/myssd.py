"""A kernel team's own SSD forward, as .ci/wheel puts it under test from outside the checkout: the
recurrence h_t = exp(A dt_t) h_{t-1} + dt_t B_t x_t, y_t = C_t h_t + D x_t, token by token in float32.

It declares what it supports with ssdcheck's KernelInfo; the suite draws only problems inside that.
"""
import torch

from ssdcheck.registry import KernelInfo, check_call


def forward(x, dt, A, B, C, chunk_size, D=None, initial_states=None, return_final_states=False,
            dt_limit=(0.0, float("inf")), **kwargs):
    check_call(forward.ssd_info, x, dt, A, B, C, chunk_size, D=D, initial_states=initial_states,
               return_final_states=return_final_states, dt_limit=dt_limit, **kwargs)
    batch, seqlen, nheads, headdim = x.shape
    ngroups, dstate = B.shape[2], B.shape[3]
    dt = dt.float().clamp(dt_limit[0], dt_limit[1])
    Bh = B.float().repeat_interleave(nheads // ngroups, dim=2)
    Ch = C.float().repeat_interleave(nheads // ngroups, dim=2)
    h = (torch.zeros(batch, nheads, headdim, dstate) if initial_states is None else initial_states.float().clone())
    ys = []
    for t in range(seqlen):
        decay = torch.exp(A.float()[None, :] * dt[:, t])                          # (b, h)
        h = decay[..., None, None] * h + (dt[:, t, :, None, None] * x[:, t].float()[..., None]
                                          * Bh[:, t, :, None, :])
        y = torch.einsum("bhpn,bhn->bhp", h, Ch[:, t])
        if D is not None:
            y = y + D.float()[None, :, None] * x[:, t].float()
        ys.append(y)
    out = torch.stack(ys, dim=1).to(x.dtype)
    return (out, h) if return_final_states else out


forward.ssd_info = KernelInfo(
    name="myssd", fn=forward, dtypes=("float32",), chunk_sizes=(16, 32), device="any",
    options=frozenset({"D", "initial_states", "final_states", "ngroups"}), state_dtype="fp32", matmul="ieee")
