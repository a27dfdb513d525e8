"""Object-detection study: energy box head on a frozen Faster R-CNN (paper section 4.2, appendix C)."""
