"""Camera-motion compensation: the global motion of the image between two consecutive frames.

A drone's camera pans, zooms and turns; the objects it tracks are small, so a motion of a few pixels moves a
predicted box off its object and the association fails or swaps identities. `CameraMotion` estimates, for each
new frame, the 2 x 3 affine that maps the previous frame's pixels to this frame's, on grey frames shrunk to
`size` pixels on the long side, with the detections masked out (moving objects are not the background):

- `sparse`: corners of the previous frame (`cv2.goodFeaturesToTrack`) followed into this frame by pyramidal
  Lucas-Kanade optical flow, then a similarity transform (rotation, uniform scale, translation) fitted with
  RANSAC (`cv2.estimateAffinePartial2D`);
- `orb`: ORB keypoints of both frames matched by descriptor (ratio test), then the same fit;
- `ecc`: the affine that maximises the enhanced correlation coefficient between the frames
  (`cv2.findTransformECC`), started from the translation found by phase correlation; slower, and more
  precise on low-texture ground;
- `none`: no compensation (the identity).

A frame where the estimate fails (too few points, no convergence) gives the identity.
"""

from __future__ import annotations

import cv2
import numpy as np

from tphyolo.errors import InputError
from tphyolo.track.config import CMC_METHODS

IDENTITY = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
_MIN_POINTS = 8


class CameraMotion:
    """Estimates the camera motion frame after frame: call it on each frame in order (see the module docstring).

    `method` is one of CMC_METHODS; `size` the long side, in pixels, the frames are shrunk to (never enlarged).
    """

    def __init__(self, method: str = "sparse", *, size: int = 640) -> None:
        if method not in CMC_METHODS:
            raise InputError(f"unknown camera-motion compensation {method!r}; known: {list(CMC_METHODS)}")
        self.method = method
        self.size = size
        self._orb = cv2.ORB_create(nfeatures=1000) if method == "orb" else None
        self.reset()

    def reset(self) -> None:
        """Forget the previous frame (the next call returns the identity)."""
        self._previous: np.ndarray | None = None  # shrunk grey frame
        self._previous_mask: np.ndarray | None = None
        self._previous_keypoints = None
        self._previous_descriptors = None

    def __call__(self, frame: np.ndarray, boxes: np.ndarray | None = None) -> np.ndarray:
        """The (2, 3) float64 affine from the previous frame's pixels to `frame`'s (uint8 BGR (H, W, 3) or grey
        (H, W)); `boxes` (N, 4) xyxy pixels of `frame` are left out of the estimate. Identity for the first frame."""
        if self.method == "none":
            return IDENTITY.copy()
        grey, scale = self._shrink(frame)
        mask = self._mask(grey.shape, boxes, scale)
        previous, previous_mask = self._previous, self._previous_mask
        if self.method == "orb":
            affine = self._orb_motion(grey, mask)
        elif previous is None or previous.shape != grey.shape:
            affine = None
        elif self.method == "sparse":
            affine = _sparse_motion(previous, previous_mask, grey)
        else:
            affine = _ecc_motion(previous, previous_mask, grey)
        self._previous, self._previous_mask = grey, mask
        if affine is None:
            return IDENTITY.copy()
        affine = affine.astype(np.float64)
        affine[:, 2] /= scale  # the linear part is the same at every scale; the shift is in shrunk pixels
        return affine

    def _shrink(self, frame: np.ndarray) -> tuple[np.ndarray, float]:
        if frame.ndim != 2 and (frame.ndim != 3 or frame.shape[2] != 3):
            raise InputError(f"camera motion: expected a (H, W, 3) or (H, W) image, got shape {frame.shape}")
        grey = frame if frame.ndim == 2 else cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        scale = min(1.0, self.size / max(grey.shape))
        if scale < 1.0:
            size = (max(1, round(grey.shape[1] * scale)), max(1, round(grey.shape[0] * scale)))  # 20000x16: 960x1
            grey = cv2.resize(grey, size, interpolation=cv2.INTER_AREA)
        return grey, scale

    @staticmethod
    def _mask(shape: tuple[int, int], boxes: np.ndarray | None, scale: float) -> np.ndarray:
        """uint8 mask of the shrunk frame: 255 where points may be taken, 0 on the detections and a 2 % border."""
        h, w = shape
        mask = np.zeros((h, w), np.uint8)
        mh, mw = max(1, round(0.02 * h)), max(1, round(0.02 * w))
        mask[mh : h - mh, mw : w - mw] = 255
        if boxes is not None and len(boxes):
            shrunk = np.asarray(boxes, dtype=np.float64).reshape(-1, 4) * scale
            x1, y1 = np.floor(shrunk[:, :2]).clip(0).astype(int).T
            x2, y2 = np.ceil(shrunk[:, 2:]).astype(int).T
            for a, b, c, d in zip(x1, y1, x2, y2, strict=True):
                mask[b:d, a:c] = 0
        return mask

    def _orb_motion(self, grey: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
        keypoints, descriptors = self._orb.detectAndCompute(grey, mask)
        previous_keypoints, previous_descriptors = self._previous_keypoints, self._previous_descriptors
        self._previous_keypoints, self._previous_descriptors = keypoints, descriptors
        if previous_descriptors is None or descriptors is None or len(previous_descriptors) < _MIN_POINTS:
            return None
        pairs = cv2.BFMatcher(cv2.NORM_HAMMING).knnMatch(previous_descriptors, descriptors, k=2)
        good = [p[0] for p in pairs if len(p) == 2 and p[0].distance < 0.75 * p[1].distance]
        if len(good) < _MIN_POINTS:
            return None
        source = np.float32([previous_keypoints[m.queryIdx].pt for m in good])
        target = np.float32([keypoints[m.trainIdx].pt for m in good])
        return _fit_similarity(source, target)


def _fit_similarity(source: np.ndarray, target: np.ndarray) -> np.ndarray | None:
    affine, inliers = cv2.estimateAffinePartial2D(source, target, method=cv2.RANSAC, ransacReprojThreshold=1.0)
    if affine is None or inliers is None or int(inliers.sum()) < _MIN_POINTS:
        return None
    return affine


def _sparse_motion(previous: np.ndarray, previous_mask: np.ndarray, grey: np.ndarray) -> np.ndarray | None:
    corners = cv2.goodFeaturesToTrack(previous, maxCorners=300, qualityLevel=0.01, minDistance=5, blockSize=3,
                                      mask=previous_mask)  # fmt: skip
    if corners is None or len(corners) < _MIN_POINTS:
        return None
    moved, status, _ = cv2.calcOpticalFlowPyrLK(previous, grey, corners, None, winSize=(15, 15), maxLevel=3)
    found = status.reshape(-1) == 1
    if found.sum() < _MIN_POINTS:
        return None
    return _fit_similarity(corners.reshape(-1, 2)[found], moved.reshape(-1, 2)[found])


def _ecc_motion(previous: np.ndarray, previous_mask: np.ndarray, grey: np.ndarray) -> np.ndarray | None:
    # ECC converges only from near the answer: start from the translation phase correlation finds
    (dx, dy), _ = cv2.phaseCorrelate(previous.astype(np.float32), grey.astype(np.float32))
    warp = np.array([[1.0, 0.0, dx], [0.0, 1.0, dy]], dtype=np.float32)
    criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 50, 1e-4)
    try:  # finds W with grey(W(x)) ~ previous(x): W maps previous-frame pixels to this frame's
        _, warp = cv2.findTransformECC(previous, grey, warp, cv2.MOTION_AFFINE, criteria, previous_mask, 3)
    except cv2.error:  # no convergence
        return None
    return warp
