"""The grader: a model patch's tests run as a user that cannot reach what decides the verdict.

``sentinels`` plants tests whose outcome the grader knows, ``shipping`` puts the in-container
programs (``in_container/``) into a session, ``channel`` reads what the tests reported, and
``patch_policy`` refuses files no source fix needs, and ``suspicious`` reads a patch's added
source for the hacks no test run sees (a flag on the verdict, not a refusal).
``verifiers/patch_verifier.py`` puts them together.
"""
