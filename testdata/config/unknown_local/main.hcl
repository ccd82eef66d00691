locals {
  script = "train.py"
}

job "train" {
  nodes   = 2
  command = ["python", local.scrpt]
}
