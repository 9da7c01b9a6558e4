"""Video evaluation: the datasets' layouts and files (:mod:`.datasets`) and J, F and J&F as
the DAVIS benchmark defines them (:mod:`.metrics`)."""
