"""The block-structured Kalman filter equals the textbook filter with full 8 x 8 matrices."""

import numpy as np
import pytest

from tphyolo.track.kalman import POSITION_WEIGHT, VELOCITY_WEIGHT, KalmanBoxFilter, KalmanStates


def _std(model: str, params: np.ndarray, weight: float, aspect: float) -> np.ndarray:
    w, h = params[2], params[3]
    if model == "xyah":
        return np.array([weight * h, weight * h, aspect, weight * h])
    return np.array([weight * w, weight * h, weight * w, weight * h])


class DenseFilter:
    """One box, full matrices: x' = F x, P' = F P F^T + Q; K = P H^T (H P H^T + R)^-1."""

    def __init__(self, model: str, box: np.ndarray) -> None:
        self.model = model
        self.F = np.eye(8)
        self.F[:4, 4:] = np.eye(4)
        self.H = np.eye(4, 8)
        z = KalmanBoxFilter(model).measure(box[None])[0]
        self.x = np.concatenate([z, np.zeros(4)])
        std = np.concatenate([_std(model, z, 2 * POSITION_WEIGHT, 1e-2), _std(model, z, 10 * VELOCITY_WEIGHT, 1e-5)])
        self.P = np.diag(std**2)

    def predict(self) -> None:
        position = _std(self.model, self.x, POSITION_WEIGHT, 1e-2)
        q = np.concatenate([position, _std(self.model, self.x, VELOCITY_WEIGHT, 1e-5)])
        self.x = self.F @ self.x
        self.P = self.F @ self.P @ self.F.T + np.diag(q**2)

    def update(self, box: np.ndarray) -> None:
        z = KalmanBoxFilter(self.model).measure(box[None])[0]
        r = np.diag(_std(self.model, self.x, POSITION_WEIGHT, 1e-1) ** 2)
        s = self.H @ self.P @ self.H.T + r
        k = self.P @ self.H.T @ np.linalg.inv(s)
        self.x = self.x + k @ (z - self.H @ self.x)
        self.P = self.P - k @ s @ k.T

    def warp(self, affine: np.ndarray) -> None:
        linear, shift = affine[:, :2], affine[:, 2]
        scale = np.sqrt(abs(np.linalg.det(linear)))
        t = np.zeros((8, 8))
        t[0:2, 0:2] = t[4:6, 4:6] = linear
        sizes = [1.0, scale] if self.model == "xyah" else [scale, scale]
        t[2, 2], t[3, 3], t[6, 6], t[7, 7] = sizes * 2
        self.x = t @ self.x
        self.x[:2] += shift
        self.P = t @ self.P @ t.T


@pytest.mark.parametrize("model", ["xyah", "xywh"])
def test_filter_matches_the_dense_textbook_filter_through_predict_update_and_warp(model):
    rng = np.random.default_rng(1)
    starts = np.array([[10.0, 20.0, 30.0, 36.0], [100.0, 50.0, 140.0, 90.0], [5.0, 5.0, 9.0, 21.0]])
    kf = KalmanBoxFilter(model)
    states = kf.initiate(starts)
    dense = [DenseFilter(model, box) for box in starts]
    angle = np.deg2rad(3.0)
    camera = 1.05 * np.array([[np.cos(angle), -np.sin(angle), 4.0], [np.sin(angle), np.cos(angle), -7.0]])
    camera[:, 2] /= 1.05
    for step in range(12):
        states = kf.predict(states)
        for d in dense:
            d.predict()
        if step % 4 == 3:
            states = kf.warp(states, camera)
            for d in dense:
                d.warp(camera)
        if step % 5 != 4:  # some frames without a measurement
            measured = starts + step * np.array([2.0, 1.0, 2.5, 1.0]) + rng.normal(0, 0.5, starts.shape)
            states = kf.update(states, measured)
            for d, box in zip(dense, measured, strict=True):
                d.update(box)
    np.testing.assert_allclose(states.mean, np.stack([d.x for d in dense]), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(states.covariance(), np.stack([d.P for d in dense]), rtol=1e-9, atol=1e-12)


def test_boxes_round_trip_and_a_steady_motion_is_learnt():
    kf = KalmanBoxFilter("xywh")
    box = np.array([[10.0, 20.0, 30.0, 50.0]])
    states = kf.initiate(box)
    np.testing.assert_allclose(kf.boxes(states), box)
    for step in range(1, 30):
        states = kf.update(kf.predict(states), box + [3.0 * step, -1.0 * step, 3.0 * step, -1.0 * step])
    np.testing.assert_allclose(states.mean[0, 4:], [3.0, -1.0, 0.0, 0.0], atol=0.05)
    ahead = kf.boxes(kf.predict(states))
    np.testing.assert_allclose(ahead, box + [90.0, -30.0, 90.0, -30.0], atol=0.3)


def test_hold_size_zeroes_size_velocity_of_lost_tracks_only():
    kf = KalmanBoxFilter("xywh")
    states = kf.initiate(np.array([[0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 10.0, 10.0]]))
    states.mean[:, 6:] = 2.0
    out = kf.predict(states, hold_size=np.array([True, False]))
    assert out.mean[0, 2] == 10.0 and out.mean[1, 2] == 12.0
    assert states.mean[0, 6] == 2.0  # the input is left alone


def test_states_index_and_concatenate():
    kf = KalmanBoxFilter("xyah")
    states = kf.initiate(np.arange(12, dtype=float).reshape(3, 4) * [1, 1, 2, 2])
    both = KalmanStates.concatenate([states[[2]], states[[0]]])
    np.testing.assert_array_equal(both.mean, states.mean[[2, 0]])
    np.testing.assert_array_equal(both.covariance(), states.covariance()[[2, 0]])
    with pytest.raises(ValueError, match="unknown motion model"):
        KalmanBoxFilter("xyxy")
