"""Tables and sentences for notebooks/90_analysis.ipynb, computed from the records: one
module per study (named as the study), the opening overview, and what they share
(common). Conclusions are written from the data here, so the notebook only calls, shows
and plots; a sentence flips when the data flips."""
