"""Hand tracking, simplified (after ADBench's ``hand``): linear blend skinning of a chain
of bones posed by per-bone rotations from angles, and the squared distance of the skinned
vertices to target points.

Bone i has a fixed rest rotation B_i and offset o_i relative to its parent (bone i - 1;
bone 0 to the world) and a pose rotation from its three angles, R_i = Rz Ry Rx (written
out entry by entry, vectorised over the bones).  Composed along the chain,

    A_i = A_{i-1} B_i R_i,   a_i = a_{i-1} + A_{i-1} o_i,

and, with the rest pose (all angles 0) (A0_i, a0_i), a vertex v with skinning weights
w_i (summing to 1) goes to  sum_i w_i (A_i A0_i^T (v - a0_i) + a_i).
Loss: sum over vertices of |skinned - target|^2.  Timed: the loss and its gradient with
respect to the (bones, 3) angles.  Reference: PyTorch, float64.  Inputs (seed 17):
22 bones (as ADBench's hand model), rest rotations from angles ~ N(0, 0.3^2), unit
offsets along x, vertices spread along the chain plus N(0, 1), weights dense, positive,
angles ~ N(0, 0.2^2); targets = the vertices skinned at angles + N(0, 0.05^2), plus
N(0, 0.05^2) noise.
--quick: 4 bones, 10 vertices.
"""
import numpy as np

from ..harness import Config
from .common import STANDARD, standard

NAME = "ht"
FRAMEWORKS = STANDARD
SIZES, QUICK_SIZES = (544, 5_000), (10,)
XLABEL = "vertices (22 bones in a chain)"
BONES = 22


def rotations(m, angles):
    """(bones, 3) angles (x, y, z) -> (bones, 3, 3) rotations Rz(z) Ry(y) Rx(x)."""
    cx, cy, cz = m.cos(angles[:, 0]), m.cos(angles[:, 1]), m.cos(angles[:, 2])
    sx, sy, sz = m.sin(angles[:, 0]), m.sin(angles[:, 1]), m.sin(angles[:, 2])
    return m.stack([cz * cy, cz * sy * sx - sz * cx, cz * sy * cx + sz * sx,
                    sz * cy, sz * sy * sx + cz * cx, sz * sy * cx - cz * sx,
                    -sy, cy * sx, cy * cx], 1).reshape(angles.shape[0], 3, 3)


def skin(m, rest, offsets, rest_inv_rot, rest_pos, verts, weights, pose):
    """Skinned vertices (3, vertices): ``rest`` (bones, 3, 3) rest rotations, ``offsets``
    (bones, 3, 1), ``rest_inv_rot`` (bones, 3, 3) = A0^T, ``rest_pos`` (bones, 3, 1),
    ``verts`` (3, vertices), ``weights`` (bones, 1, vertices), ``pose`` (bones, 3, 3)."""
    rots, pos = [], []
    for i in range(pose.shape[0]):
        local = m.matmul(rest[i], pose[i])
        if i == 0:
            rots.append(local)
            pos.append(offsets[0])
        else:
            rots.append(m.matmul(rots[-1], local))
            pos.append(pos[-1] + m.matmul(rots[-2], offsets[i]))
    A, a = m.stack(rots, 0), m.stack(pos, 0)
    moved = m.matmul(m.matmul(A, rest_inv_rot), verts - rest_pos) + a  # (bones, 3, vertices)
    return m.sum(weights * moved, 0)


def objective(m, consts, angles):
    *model, targets = consts
    d = skin(m, *model, rotations(m, angles)) - targets
    return m.sum(d * d)


def configs(verts, quick):
    return [Config(f"v={verts}", verts, "float64",
                   {"verts": verts, "bones": 4 if quick else BONES})]


def _rest_pose(rest, offsets):
    rots, pos = [], []
    for i in range(rest.shape[0]):
        pos.append(offsets[i] if i == 0 else pos[-1] + rots[-1] @ offsets[i])
        rots.append(rest[i] if i == 0 else rots[-1] @ rest[i])
    return np.stack(rots), np.stack(pos)


def _data(cfg):
    nb, nv = cfg.params["bones"], cfg.params["verts"]
    r = np.random.RandomState(17)
    rest = rotations(np, 0.3 * r.randn(nb, 3))
    offsets = np.tile(np.array([1.0, 0.0, 0.0])[:, None], (nb, 1, 1))
    rest_rot, rest_pos = _rest_pose(rest, offsets)
    verts = r.randn(3, nv) + np.linspace(0, nb, nv)[None, :] * np.array([[1.0], [0.2], [0.0]])
    weights = r.uniform(0, 1, (nb, nv)) ** 4
    weights = (weights / weights.sum(0))[:, None, :]
    model = [rest, offsets, rest_rot.transpose(0, 2, 1).copy(), rest_pos, verts, weights]
    angles = 0.2 * r.randn(nb, 3)
    pose = rotations(np, angles + 0.05 * r.randn(nb, 3))
    targets = skin(np, *model, pose) + 0.05 * r.randn(3, nv)
    return (*model, targets), [angles]


standard(globals())
