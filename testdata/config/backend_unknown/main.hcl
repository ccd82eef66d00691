backend "s3" {
  bucket = "x"
}
