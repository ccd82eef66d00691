job "train" {
  nodes   = 1
  command = ["python", "train.py"]
  env = {
    NCCL_DEBUG = "INFO"
    "A=B"      = "c"
    "BAD NAME" = "d"
  }
}
