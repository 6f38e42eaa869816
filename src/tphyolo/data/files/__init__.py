"""Reading files safely: images (the one image reader, its pixel and side limits, the RAM cache), bounded JSON,
the label-path rule (images/ -> labels/), and a file's SHA-256 (`digest`).

Importing this package imports none of its modules; import them directly (`tphyolo.data.files.image_io`).
"""
