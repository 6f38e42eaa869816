"""`tphyolo bench serve`: load on the detection service (`load`), the steps of a request timed in-process
(`stages`), and the benchmark that puts them in rows (`bench`)."""
