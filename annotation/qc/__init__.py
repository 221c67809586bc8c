"""Expert quality control: review and recolor requests, blind votes, agreement statistics."""
