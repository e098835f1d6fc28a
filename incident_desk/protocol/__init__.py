"""The SDK's moving parts: client capabilities, sampling and elicitation, eras, tool kinds and results."""
