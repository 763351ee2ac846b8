"""Tables, sentences and figures computed from the records: one module per study (its
registry entry's `analysis`: runs, headline, figure, section over one frame), what they
share (`claims`, `common`, `sides`, `repeat_spread`), notebook 90's findings and sections
(`findings`, `sections`) and its opening (`overview`)."""
