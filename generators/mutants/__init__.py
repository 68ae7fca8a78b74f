"""What every language's bug operators share (the site sampler, the target, the mutant), below
both ``bugs/`` (the injector) and ``languages/`` (each language's operators), so neither loops."""
