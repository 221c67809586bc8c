"""Model wrappers and their registry: text-to-image generation, GroundingDINO + SAM segmentation, tiny test models, weight checks."""
