"""The package's lowest layer: helpers every other part may use, which import nothing of
fastcollate above them (only the native module)."""
