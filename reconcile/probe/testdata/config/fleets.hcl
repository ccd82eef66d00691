ssh "lab" {
  user            = "ubuntu"
  identity_file   = "keys/id_ed25519"
  known_hosts     = "~/.ssh/lab_known_hosts"
  host_key_check  = "accept-new"
  bastion         = "jump@bastion.lab.example.org:2200"
  connect_timeout = "7s"
}

fleet "lab" {
  ssh           = ssh.lab
  region        = "paris"
  zone          = "paris-1"
  network_group = "rack-3"

  host "a1" { address = "10.1.0.11" }
  host "a3" { address = "10.1.0.13:2222" }
  # Says its zone itself, the same as the fleet's: the host's own claim.
  host "a4" {
    address = "10.1.0.14"
    zone    = "paris-1"
  }
  host "b1" {
    address       = "[fd00:10:1::21]"
    zone          = "paris-2"
    network_group = "rack-4"
  }
}

fleet "home" {
  host "desk" { address = "desk.local" }
}
