fleet "cloud" {
  count = 2
  gcp {
    project      = "my-project"
    zone         = "europe-west1"
    machine_type = "a2-highgpu-4g"
    image        = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
  }
}
