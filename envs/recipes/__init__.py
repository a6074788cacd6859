"""Sandbox environments ("recipes"): what a baked image contains, how it is built and stored.

A recipe names the packages an episode's sandbox starts with. Its content hash names the
built artifact on every backend, so two servers with the same recipe share an image.
"""

from analyst_env.envs.recipes.fields import RecipeError, split_list
from analyst_env.envs.recipes.recipe import Recipe

__all__ = ["Recipe", "RecipeError", "split_list"]
