locals {
  trace = ["--master_addr", "10.0.0.9"]
}

job "train" {
  nodes         = 2
  gpus_per_node = 2
  command       = ["python", "train.py"]

  torchrun {
    args = [
      "--log_dir", "logs",
      "--nproc-per-node=2",
      "--rdzv_backend", "c10d",
      "--nnod", "3",
    ]
  }
}

job "eval" {
  nodes   = 1
  command = ["python", "eval.py"]

  torchrun {
    args = concat(["--redirects", "1"], local.trace)
  }
}
