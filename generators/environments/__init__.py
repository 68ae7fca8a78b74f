"""How a repository is installed and tested: profiles, base images, environment images."""
