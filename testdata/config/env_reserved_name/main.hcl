locals {
  common_env = { IFS = ",", NCCL_DEBUG = "INFO" }
}

job "train" {
  nodes   = 1
  command = ["python", "train.py"]
  env     = merge(local.common_env, { gpulayer_port = "29500" })
}
