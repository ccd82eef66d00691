fleet "rack" {
  link_bandwidth {
    nvlink_domain = "900GB/s"
    zone          = "100gbps"
  }
  host "a1" { address = "10.0.0.1" }
}
