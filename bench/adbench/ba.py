"""Bundle adjustment: the sum of squared reprojection residuals (ADBench's ``ba``, Srajer,
Kalra, Fitzgibbon 2018, without its Jacobian: the objective's gradient instead).

A camera is 11 numbers, as in ADBench: a Rodrigues rotation vector r (3), the camera
centre c (3), the focal length f, the principal point x0 (2) and the radial distortion
k1, k2.  An observation j of point X by camera (r, c, f, x0, k) projects

    Y = R(r) (X - c)                                   (Rodrigues: Y = Z cos t
        + (w x Z) sin t + w (w . Z)(1 - cos t),  t = |r|, w = r / t,  Z = X - c)
    p = Y[:2] / Y[2],   q = p (1 + k1 |p|^2 + k2 |p|^4),   proj = f q + x0

and the objective is sum_j |proj_j - feat_j|^2 (ADBench's residuals with unit weights).
Vectorised over the observations: cameras and points gathered by index (the backward
scatters them back), the cross product written with slices.
Timed: the objective and its gradient with respect to all cameras and all points.
Reference: PyTorch, float64.  Inputs (seed 16): points ~ N(0, 0.7^2); cameras about 8 units
behind the origin looking along +z, small rotations (|r| > 0), f ~ 1, small distortion;
every point seen by 3 random cameras (all in front of them); features = small random
image points.
--quick: 3 cameras, 10 points.
"""
import numpy as np

from ..harness import Config
from .common import STANDARD, standard

NAME = "ba"
FRAMEWORKS = STANDARD
SIZES, QUICK_SIZES = (1_000, 10_000), (10,)
XLABEL = "points (16 cameras, 3 observations a point)"
CAMERAS, SEEN_BY = 16, 3


def cross(m, a, b):
    return m.stack([a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1],
                    a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
                    a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]], 1)


def rodrigues(m, r, z):
    """Rotate the rows of ``z`` by the rotation vectors in the rows of ``r`` (|r| > 0)."""
    theta = m.sqrt(m.sum(r * r, 1))[:, None]
    w = r / theta
    cos, sin = m.cos(theta), m.sin(theta)
    return z * cos + cross(m, w, z) * sin + w * (m.sum(w * z, 1)[:, None] * (1.0 - cos))


def objective(m, consts, cams, points):
    cam_idx, pt_idx, feats = consts
    c = cams[cam_idx]
    y = rodrigues(m, c[:, 0:3], points[pt_idx] - c[:, 3:6])
    p = y[:, 0:2] / y[:, 2:3]
    rsq = m.sum(p * p, 1)[:, None]
    proj = p * (1.0 + c[:, 9:10] * rsq + c[:, 10:11] * rsq * rsq) * c[:, 6:7] + c[:, 7:9]
    res = proj - feats
    return m.sum(res * res)


def configs(points, quick):
    return [Config(f"m={points}", points, "float64",
                   {"points": points, "cameras": 3 if quick else CAMERAS})]


def _data(cfg):
    npt, ncam = cfg.params["points"], cfg.params["cameras"]
    r = np.random.RandomState(16)
    cams = np.concatenate([0.1 * r.randn(ncam, 3),                       # rotation
                           np.array([0.0, 0.0, -8.0]) + 0.5 * r.randn(ncam, 3),  # centre
                           1.0 + 0.1 * r.randn(ncam, 1),                 # focal length
                           0.01 * r.randn(ncam, 2),                      # principal point
                           0.01 * r.randn(ncam, 2)], 1)                  # k1, k2
    points = 0.7 * r.randn(npt, 3)
    pt_idx = np.repeat(np.arange(npt), SEEN_BY)
    cam_idx = r.randint(0, ncam, pt_idx.size)
    feats = 0.1 * r.randn(pt_idx.size, 2)
    return (cam_idx, pt_idx, feats), [cams, points]


standard(globals())
