"""The review of an attempt: the reviewer contract (``contract``: the JSON document, its
validation and the decision) and one review stage run (``stage``). See README.md."""
