ssh "lab" {
  user            = "ubuntu"
  identity_file   = "~/.ssh/id_ed25519"
  known_hosts     = "~/.ssh/known_hosts"
  host_key_check  = "strict"
  bastion         = "ubuntu@jump.lab.example.org"
  connect_timeout = "15s"
}

ssh "cloud" {
  user           = "gpulayer"
  host_key_check = "accept-new"
}

# Four workstations in one rack of the Paris lab.
fleet "lab" {
  ssh           = ssh.lab
  region        = "paris"
  zone          = "paris-1"
  network_group = "rack-3"
  labels        = { team = local.team }

  host "a1" { address = "10.1.0.11" }
  host "a2" { address = "10.1.0.12" }
  host "a3" {
    address = "10.1.0.13:2222"
    labels  = { gpu = "rtx6000ada" }
  }
  host "b1" {
    address       = "[fd00:10:1::21]"
    network_group = "rack-4"
  }
}

# Machines gpulayer creates on GCP.
fleet "cloud" {
  ssh   = ssh.cloud
  count = var.cloud_machines

  gcp {
    project      = var.project
    zone         = var.zone
    machine_type = "a2-highgpu-4g"
    image        = local.image
  }
}
