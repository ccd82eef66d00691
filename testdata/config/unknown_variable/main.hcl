variable "epochs" {
  default = 3
}

job "train" {
  nodes   = 2
  command = ["python", "train.py", "--epochs", var.epoch]
}
