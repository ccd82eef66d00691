variable "api_token" {
  type      = string
  sensitive = true
  default   = "hunter2-Secret"

  validation {
    condition     = can(regex("^tok-", var.api_token))
    error_message = "api_token must start with tok-, got ${var.api_token}."
  }
}
