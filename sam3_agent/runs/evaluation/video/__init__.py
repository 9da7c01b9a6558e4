"""Video evaluation: the datasets' layouts (:mod:`.datasets`, :mod:`.files`) and J, F and
J&F as the DAVIS benchmark defines them (:mod:`.metrics`)."""
