variable "project" {
  type        = string
  description = "GCP project that pays for the cloud fleet."
  default     = "my-gpu-project"
}

variable "zone" {
  type        = string
  description = "GCP zone of the machines gpulayer creates."
  default     = "europe-west1-b"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]-[a-z]$", var.zone))
    error_message = "zone must be a GCP zone such as \"europe-west1-b\"."
  }
}

variable "cloud_machines" {
  type        = number
  description = "How many GCP machines to create; 0 keeps the fleet empty."
  default     = 2
}

variable "epochs" {
  type    = number
  default = 3
}

locals {
  image = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
  common_env = {
    NCCL_DEBUG                      = "WARN"
    TORCH_NCCL_ASYNC_ERROR_HANDLING = "1"
  }
  team = "vision"
}
