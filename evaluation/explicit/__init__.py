"""The explicit-color evaluation mode (GenColorBench protocol): prompts, masks, dominant color, scores; the shape renders its tests use are core (`evaluation.color.synthetic`)."""
