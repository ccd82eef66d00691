package nvmltopo

import "errors"

// ErrUnavailable means NVML cannot be used here: gpulayer was built without
// cgo or not for Linux, the driver's libnvidia-ml.so.1 is missing, or
// nvml.Init failed. Errors from Local wrap it with the reason.
var ErrUnavailable = errors.New("NVML unavailable")
