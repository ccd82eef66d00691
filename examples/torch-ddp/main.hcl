# A real PyTorch DistributedDataParallel training on two machines with one
# GPU each: gpulayer sends ./src to both, prints their torch version once,
# and starts train.py under torchrun with the group's rendezvous. The
# model is a small MLP on random tensors, so the example needs no data
# set and ends in seconds; rank 0 prints the loss of each epoch (see it
# with `gpulayer logs ddp`).
#
# Point it at your machines with variables:
#
#   gpulayer plan  examples/torch-ddp --var gpu0=10.0.0.10 --var gpu1=10.0.0.11
#   gpulayer apply examples/torch-ddp --var gpu0=10.0.0.10 --var gpu1=10.0.0.11
#
# or try it on the simulated fleet: `gpulayer sandbox --dir ./sbx` writes
# its own fleets (sandbox.hcl); copy only the job below (and ./src) beside
# it, as with examples/demo. The sandbox's GPUs are not real, and train.py
# then falls back to gloo on the CPU.

variable "gpu0" {
  type        = string
  description = "Address of the first machine (host or host:port)."
}

variable "gpu1" {
  type        = string
  description = "Address of the second machine (host or host:port)."
}

variable "user" {
  type        = string
  description = "Login user on both machines."
  default     = "ubuntu"
}

ssh "gpus" {
  user           = var.user
  identity_file  = "~/.ssh/id_ed25519"
  host_key_check = "strict"
}

# Both machines in one zone: a DDP step all-reduces every gradient, so the
# nodes should be close. Say where yours are.
fleet "gpus" {
  ssh    = ssh.gpus
  region = "lab"
  zone   = "lab-1"

  host "gpu-0" { address = var.gpu0 }
  host "gpu-1" { address = var.gpu1 }
}

policy "one_zone" {
  group_locality = "zone"
}

job "ddp" {
  policy        = policy.one_zone
  nodes         = 2
  gpus_per_node = 1
  launcher      = "torchrun"
  command       = ["python3", "train.py", "--epochs", "5"]
  stop_timeout  = "30s"

  # The code directory is the working directory on each machine.
  code {
    source = "./src"
  }

  # Runs once per machine for this setup and code; its output is in the
  # node's setup log.
  setup = "python3 -c 'import torch; print(torch.__version__)'"

  # Debian's and Ubuntu's packaged torch 1.13 (python3-torch) runs on a
  # Python it was not made for, and its torchrun stops at start unless
  # --redirects and --tee are set (docs/apply.md). They do no harm on
  # other versions: the workers' output is also kept in torchrun's log
  # directory.
  torchrun {
    args = ["--redirects", "1", "--tee", "1"]
  }
}
