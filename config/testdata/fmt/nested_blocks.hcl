fleet "cloud" {
count = var.machines
gcp {
project = "p"
zone = var.zone
machine_type = "a2-highgpu-4g"
    image = local.image
}
}
