# The configuration the example pipeline (.github/workflows/gpulayer.yml)
# plans on pull requests and applies on merge. State lives in a bucket, so
# every runner of every pipeline sees the same state and the same lock.

backend "gcs" {
  bucket = "acme-gpulayer-state"
  prefix = "gpulayer/prod"
}

variable "ssh_key" {
  type        = string
  description = "Path of the SSH private key the pipeline writes from its secret."
  default     = "~/.ssh/gpulayer_ed25519"
}

ssh "ci" {
  user           = "gpulayer"
  identity_file  = var.ssh_key
  known_hosts    = "known_hosts" # checked into the repository, beside this file
  host_key_check = "strict"
}

fleet "lab" {
  ssh           = ssh.ci
  region        = "paris"
  zone          = "paris-1"
  network_group = "rack-3"

  host "a1" { address = "10.1.0.11" }
  host "a2" { address = "10.1.0.12" }
  host "a3" { address = "10.1.0.13" }
  host "a4" { address = "10.1.0.14" }
}

policy "one_rack" {
  group_locality   = "network_group"
  on_unschedulable = "wait"
}

job "train" {
  policy        = policy.one_rack
  nodes         = 2
  gpus_per_node = 4
  launcher      = "torchrun"
  command       = ["python", "train.py", "--config", "configs/prod.yaml"]
  workdir       = "/srv/train"
  env           = { NCCL_DEBUG = "WARN" }
  stop_timeout  = "2m"
}
