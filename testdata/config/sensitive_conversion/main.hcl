variable "gpus" {
  sensitive = true
  default   = "hunter2-Secret"
}

job "train" {
  nodes         = 1
  gpus_per_node = tonumber(var.gpus)
  command       = ["python", "train.py"]
}
