# Loaded as validate loads it, given no values: every variable is unknown,
# and only the two mistakes that do not depend on them are reported.
variable "nodes" {
  type = number

  validation {
    condition     = var.nodes >= 1
    error_message = "nodes must be at least 1."
  }
}

variable "address" {
  type = string
}

variable "script" {}

variable "machines" {
  type = number
}

variable "bucket" {
  type      = string
  sensitive = true
}

backend "gcs" {
  bucket = var.bucket
}

ssh "lab" {
  user            = var.script
  port            = var.nodes
  bastion         = var.address
  connect_timeout = "${var.nodes}s"
}

fleet "lab" {
  ssh  = ssh.lab
  zone = var.script
  host "a1" { address = var.address }
  host "a2" { address = "${var.address}:2222" }
}

fleet "cloud" {
  count = var.machines
  gcp {
    project           = "my-project"
    zone              = "europe-west1-b"
    machine_type      = "n1-standard-8"
    image             = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
    accelerator_type  = "nvidia-tesla-t4"
    accelerator_count = var.nodes
    labels            = { team = var.script }
  }
}

policy "tight" {
  group_locality = "zones"
  regions        = [var.script]
}

job "train" {
  policy        = policy.tight
  nodes         = var.nodes
  gpus_per_node = var.nodes * 2
  command       = ["python", var.script, "--epochs", "3"]
  env           = { SCRIPT = var.script, "BAD NAME" = "x" }
  launcher      = var.script
  stop_timeout  = "${var.nodes}m"
  master_port   = var.nodes + 29500
  labels        = { user = ssh.lab.user }
}
