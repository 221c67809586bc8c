"""The explicit-color evaluation mode (GenColorBench protocol): prompts, masks, dominant color, scores."""
