# Eight A100 machines gpulayer creates on GCP, kept close together, and a
# job that must run inside one block of GPUs. See docs/providers.md.

variable "project" {
  type        = string
  description = "GCP project that owns the machines."
}

variable "machines" {
  type        = number
  description = "How many machines to keep; 0 deletes them all."
  default     = 8
}

ssh "cloud" {
  user           = "gpulayer"
  identity_file  = "~/.ssh/gpulayer_ed25519"
  host_key_check = "strict" # created machines are reached with the host keys GCP publishes
}

fleet "a100" {
  ssh   = ssh.cloud
  count = var.machines

  gcp {
    project      = var.project
    zone         = "us-central1-a"
    machine_type = "a2-highgpu-8g"
    image        = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
    disk_size_gb = 200
    placement    = "compact"
    tags         = ["gpulayer-ssh"]
    labels       = { team = "vision" }
    metadata     = { ssh-keys = "gpulayer:ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyReplaceWithYours gpulayer" }
  }
}

policy "one_block" {
  group_locality = "network_group" # the physical cluster/block GCP reports
}

job "pretrain" {
  policy        = policy.one_block
  nodes         = 4
  gpus_per_node = 8
  command       = ["python", "pretrain.py", "--config", "configs/7b.yaml"]
  workdir       = "/home/gpulayer/llm"
  env           = { NCCL_DEBUG = "WARN" }
}
