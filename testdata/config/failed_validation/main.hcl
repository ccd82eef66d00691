variable "nodes" {
  type    = number
  default = 0

  validation {
    condition     = var.nodes >= 1
    error_message = "nodes must be at least 1."
  }
}

job "train" {
  nodes   = max(var.nodes, 1)
  command = ["python", "train.py"]
}
