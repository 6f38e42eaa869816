"""TensorRT engines: the float writer (`engine`) and the INT8 writer with TensorRT's calibrator (`int8`)."""
